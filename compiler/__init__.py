"""The packet-subscription compiler: annotated P4 header specs and rules in, per-field
match-action tables (the pipeline IR and its entries) out.

Modules, in the order data flows through them:
  spec.py       the annotated P4_16 header spec (fields, widths, match kinds, framing)
  rules.py      the rule language: text -> rule ASTs, each rule shape parsed once; its
                syntax in rule_syntax.py, its typing against the spec in rule_typing.py
  semantics.py  the reference evaluator: the definition of correct
  intervals.py  interval sets over a field's domain
  normalize.py  filters -> disjunctive normal form over per-field interval sets
  diagram.py    the field-ordered decision diagram with its reductions
  tables.py     slicing the diagram into per-field tables, multicast groups
  ir.py         pipeline.json / entries.json, and the table interpreter behind `camus eval`
  compile.py    the whole pipeline as one call
  incremental.py  a compiled rule set that takes one change at a time (id_space.py:
                its ids, as tables.stable_ids gives them)
"""
