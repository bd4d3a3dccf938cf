"""Return shapes: what a step's result may look like, as a JSON Schema, where it comes from,
reduced to what can rule a path out, and walked along the paths a plan reads.

A shape comes from the tool's owner (an annotation, a docstring, an option), from an MCP
server (untrusted: any size, any nesting, any regex) or from a plan (an agent step's
``output_schema``). Whatever its source, it is used the same way and under the same rule:
**sound, never presumptuous**. A path is ruled out only when the shape says no value
could have it; everything the walk cannot follow is accepted, as it was before shapes.
That rule decides every detail below:

* ``compact_shape`` keeps the keywords that describe structure (``type``, ``properties``,
  ``additionalProperties``, ``items``, ``prefixItems``, ``anyOf``/``oneOf``, ``allOf``,
  local ``$ref`` and its ``$defs``, small scalar ``enum``/``const``) and drops the rest.
  Dropping a keyword only ever allows more values, so it is always sound; the one keyword
  that *adds* values next to ``additionalProperties: false`` is ``patternProperties``,
  so an object that has it counts as open. Past the bounds (depth, nodes, bytes) a part
  becomes "anything" or the whole shape is dropped; no regex is ever compiled.
* An object is closed only with ``additionalProperties: false``; an open object lets any
  field exist. ``anyOf``/``oneOf`` (and ``nullable``, ``type`` lists) are unions: a field
  is ruled out only if every branch rules it out. Of ``allOf`` (and ``$ref`` with sibling
  keywords) one conjunct is kept: any single one describes a superset.
* Paths read through arrays as JSONata does: a name applies to each item.
* The walk is sound on a schema that was not compacted too (a ``ToolSpec`` or a tool
  table built by hand): it reads ``oneOf``, ``nullable`` and ``patternProperties`` itself.
* The walk spends a deterministic budget (schema nodes visited, for the whole plan): past
  it, the rest is accepted. Nothing here reads a clock or iterates a set, so the verdict
  and its wording are the same in workflow code on every worker.

The modules, one job each: ``declared`` (a tool's shape from its annotation or an option)
and ``docstrings`` (from its docstring's ``Returns:``), ``compact`` (a schema reduced to what
can rule a path out), ``walk`` (paths walked through a shape), ``results`` (each step's
result shape), ``constructed`` (array and object constructors typed part by part),
``checks`` (the plan's paths and bound types held against the shapes) and ``text`` (a shape
in a few words, for the model and for messages). Each name is imported from its module.
"""
