"""Debian and Ubuntu: apt and dpkg (:mod:`.apt`: the package manager; :mod:`.probes`: detection;
:mod:`.dpkg`: package states; :mod:`.releases`: what each supported release carries)."""

CREDENTIALS_NOTE = "apt in /etc/apt/auth.conf.d/<name>.conf"
"""Where apt reads a repository's credentials (apt_auth.conf(5)): :attr:`.apt.Apt.credentials_note`,
here so that the spec's refusal of credentials in a URL names it without loading apt's tools."""
