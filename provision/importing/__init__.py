"""``provision import``: the spec of a machine as it is (like ``nixos-generate-config`` or
``terraform import``).

Data flows the usual way, read backwards: facts -> a draft spec whose every chosen value carries the
reason it was chosen (:mod:`provision.importing.sections`) -> the choices the facts leave open
settled by the planner itself (:mod:`provision.importing.settle`: of the values the facts allow, the
one whose plan changes least; ties keep the evidence's order) -> YAML with those reasons as comments
(:mod:`provision.importing.render`) -> files written atomically, one spec per distinct machine shape
and a fleet file for an inventory (:mod:`provision.importing.workflow`).
"""
