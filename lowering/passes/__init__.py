"""Passes over the tile IR for the mtia target, run by `lowering.passes.manager.PassPipeline`.

Each pass is a frozen dataclass with a `name`, its options as fields, and one
``apply(module, ctx)``; decorating it with `register_pass` adds it to the default pipeline (every
module of this package is imported when the registry is first read, and so are the entry points of
group ``kegen.lowering.passes``). Nothing is imported here, so `import lowering.passes.x` stays cheap.
"""
