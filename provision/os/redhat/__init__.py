"""Rocky Linux and RHEL: dnf and rpm (:mod:`.dnf`: the package manager; :mod:`.probes`: detection;
:mod:`.parse`: rpm and dnf outputs; :mod:`.releases`: what each supported release carries)."""

CREDENTIALS_NOTE = "dnf as the repository's username and password in its /etc/yum.repos.d file"
"""Where dnf reads a repository's credentials (dnf.conf(5) repository options ``username`` and
``password``): :attr:`.dnf.Dnf.credentials_note`, here so that the spec's refusal of credentials in
a URL names it without loading dnf's tools."""
