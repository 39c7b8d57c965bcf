"""Models `kegen tune` ships (KernelBench layout with get_input_variants): `dlrm` (DLRM-style ranking),
`encoder` (transformer encoder block), `conv_transformer` (conv + attention block), `int4_mlp` (an
LLM MLP with GPTQ-packed int4 weights). Each module's
PRESETS holds its small default and a production-scale preset."""

from pathlib import Path

MODELS_DIR = Path(__file__).parent
SHIPPED = ("dlrm", "encoder", "conv_transformer", "int4_mlp", "gqa_decoder")


def model_path(name: str) -> Path:
    """The file of shipped model `name`."""
    if name not in SHIPPED:
        raise ValueError(f"unknown model {name!r}: choose one of {', '.join(SHIPPED)}")
    return MODELS_DIR / f"{name}.py"
