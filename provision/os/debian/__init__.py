"""Debian and Ubuntu: apt and dpkg (:mod:`.apt`: the package manager; :mod:`.probes`: detection;
:mod:`.dpkg`: package states; :mod:`.releases`: what each supported release carries)."""
