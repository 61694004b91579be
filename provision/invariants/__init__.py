"""Invariants: properties of the running machine that must hold after apply, judged from facts.

Each invariant (:class:`~provision.invariants.base.Invariant`) reads facts and gives a
:class:`~provision.invariants.base.Verdict`: it holds, it is violated (with what was observed,
the cause seen, and the fix derived from that cause), it cannot be judged (with the reason), or
it does not apply here. The planner turns violations into findings (and, for the binding and
boot-time invariants, into kernel-module and reboot steps); verify reports one check per
invariant; both read the same verdicts. :data:`provision.invariants.registry.INVARIANTS` lists
them; ``docs/invariants.md`` describes each with its public source.
"""
