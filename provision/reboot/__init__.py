"""``apply --reboot`` and ``provision resume``: the parts that know nothing of apply's sequence.

:mod:`.record` (the resume record: what is left to do after a reboot, sealed, trusted only
when only its owner could have written it), :mod:`.unit` (the one-shot systemd unit that runs
the resume on this machine after boot), :mod:`.remote` (the reboot play: Ansible's
``ansible.builtin.reboot`` over the hosts of an inventory) and :mod:`.mok` (the console
instructions of a pending MOK enrollment). The sequences that use them are
:mod:`provision.apply.reboot` (after an apply) and :mod:`provision.apply.resume`.
"""
