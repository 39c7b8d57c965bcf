"""Passes over the tile IR for the mtia target, run by `lowering.passes.manager.PassPipeline`.

Each pass is a frozen dataclass with a `name`, its options as fields, and one
``apply(module, ctx)``. The default pipeline is the one list `lowering.pipeline.DEFAULT_PASSES`;
a pass outside it is made known by name with `lowering.passes.manager.register_pass`. Nothing is
imported here, so `import lowering.passes.x` stays cheap. Helpers that are not passes live beside
the IR (`lowering.analysis`) or the code generator (`lowering.codegen.local_alloc`).
"""
