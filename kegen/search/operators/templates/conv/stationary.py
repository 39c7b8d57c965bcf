"""mtia rewrite of a convolution seed with the weights stationary in the local store.

`conv_rows` reloads every tap's [BLOCK_CO, BLOCK_CI] weight tile for each output row it computes:
for conv2d_fp16 that is 144 KiB of weights per 14 KiB of output, the DMA unit's busiest traffic.
Here each program loads all taps' weight tiles once (C_in in one block), then walks a run of
output tiles (one output row's BLOCK_W pixels each: `(oh, column block)` pairs of one image), each
tap's input tile one block DMA as in `conv_rows`. The runs are sized so that about one program per
PE (two with `dual_core`) covers the output.

The taps are unrolled at trace time: the kernels are generated for up to `KH_MAX` x `KW_MAX` taps,
each tap's statements under constexpr guards (`if KH > kh`), so a 3x3 convolution compiles nine
weight tiles and nine loads per output tile. Two tile shapes: rows (`conv_ws_kernel`, BLOCK_W
pixels of one output row) and, for a 2-D "same" convolution (stride 1, output the input's size)
whose rows would leave a quarter of their tiles masked or are narrower than 32 pixels, flattened
pixels (`conv_px_kernel`: BLOCK_W consecutive pixels of an image across rows, each tap's input one
block DMA at a constant shift, masked per pixel). The launch halves the output-channel block until
the estimated footprint (weights, accumulator, the taps' input tiles per stage, the output tile)
fits the local store (`CONVS_LOCAL_BYTES`, mtia-2i's 384 KiB, halved with dual_core), tries rows
where pixel tiles do not fit, and runs the `conv_rows` kernel, which the module carries too, where
neither fits or the taps exceed the generated kernels. Measured at full size (docs/results/
gemm_peak_mtia.md, stationary_moves_mtia.md): conv2d_fp16 75.6 us (rows, dual core) -> 59.6 us (80.2% of
its roofline; 60.7 us under D41); the hold-out 5x5 conv (40-pixel rows, 32 -> 96 channels) 37.9 us
(row kernel) -> 26.3 us with pixel tiles.
"""

from __future__ import annotations

from functools import partial

from kegen.search.operators.mutations.base import Mutation, MutationError
from kegen.search.operators.templates.conv import rows as conv_rows
from kegen.search.operators.templates.gpu_conv import bn_act_apply, bn_prologue, conv_module
from kegen.search.operators.templates.gpu_launch import module_imports, module_support, rewritten_module

MARKER = f"{conv_rows.REWRITTEN} stationary weights"
KH_MAX, KW_MAX = 5, 7  # taps the generated kernels cover (1-D kernels up to 7, 2-D up to 5x7)
LOCAL_BYTES = 384 * 1024  # mtia-2i's local store per PE
ALIGN_BYTES = 32  # mtia's DMA alignment (mtia_sim.isa.ALIGNMENT): a misaligned operand costs more bytes


def guarded(lines: list[str], indent: str, kh: int, kw: int, body: list[str]) -> None:
    """`body` under the constexpr guards of tap (kh, kw), appended to `lines`."""
    for cond in ([f"KH > {kh}"] if kh else []) + ([f"KW > {kw}"] if kw else []):
        lines.append(f"{indent}if {cond}:")
        indent += "    "
    lines += [indent + line for line in body]


def _weights_head(name: str, tile_params: str, kh_max: int, kw_max: int) -> list[str]:
    """A stationary kernel's signature and prologue: the program's tile run, channels, every tap's
    weight tile loaded once, the bias."""
    lines = [
        "@triton.jit",
        f"def {name}(x_ptr, w_ptr, b_ptr, m_ptr, v_ptr, g_ptr, be_ptr, r_ptr, y_ptr, C_IN, C_OUT, H, W, EPS,",
        f"                   {tile_params}",
        "                   KH: tl.constexpr, KW: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,",
        "                   STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr, DIL_H: tl.constexpr,",
        "                   DIL_W: tl.constexpr, HAS_BN: tl.constexpr, BN_AFFINE: tl.constexpr,",
        "                   HAS_RES: tl.constexpr,",
        "                   ACT: tl.constexpr,",
        "                   HAS_BIAS: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr,",
        "                   BLOCK_W: tl.constexpr):",
        "    n = tl.program_id(0)",
        "    t0 = tl.program_id(1) * PER",
        "    t1 = tl.minimum(t0 + PER, TILES)",
        "    co = tl.program_id(2) * BLOCK_CO + tl.arange(0, BLOCK_CO)",
        "    co_ok = co < C_OUT",
        "    ci = tl.arange(0, BLOCK_CI)",
        "    ci_ok = ci < C_IN",
        "    w_tile = w_ptr + co[:, None] * C_IN + ci[None, :]",
        "    w_mask = co_ok[:, None] & ci_ok[None, :]",
    ]
    for kh in range(kh_max):
        for kw in range(kw_max):
            load = f"w{kh}_{kw} = tl.load(w_tile + ({kh} * KW + {kw}) * C_OUT * C_IN, mask=w_mask, other=0.0)"
            guarded(lines, "    ", kh, kw, [load])
    return [
        *lines,
        "    if HAS_BIAS:",
        "        bias = tl.load(b_ptr + co, mask=co_ok, other=0.0).to(tl.float32)",
        *bn_prologue("    ", "co", "co_ok").splitlines(),
        "    x_img = x_ptr + n * C_IN * H * W + ci[:, None] * (H * W)",
    ]


def _store(index: str, valid: str) -> list[str]:
    residual = (f"r_img + {index}", f"co_ok[:, None] & {valid}")
    return [
        "        if HAS_BIAS:",
        "            acc += bias[:, None]",
        *bn_act_apply("        ", "[:, None]", residual).splitlines(),
        f"        tl.store(y_img + {index}, acc.to(y_ptr.dtype.element_ty),",
        f"                 mask=co_ok[:, None] & {valid})",
    ]


def row_tap_dots(lines: list[str], kh_max: int, kw_max: int, ci_ok: str) -> None:
    """Appends a row tile's tap loop body to `lines` (inside the kernel's `for t` loop): the column
    mask of each horizontal tap, then each tap's input tile (`x_img`, row `oh`, columns `ow`; channels
    valid where `ci_ok`) as one load and its dot with the stationary weight tile `w{kh}_{kw}` into `acc`."""
    for kw in range(kw_max):  # the column masks of this tile, one per horizontal tap
        cols = [
            f"iw{kw} = ow * STRIDE_W + ({kw} * DIL_W - PAD_W)",
            f"c{kw} = {ci_ok}[:, None] & ((iw{kw} >= 0) & (iw{kw} < W))[None, :]",
        ]
        guarded(lines, "        ", 0, kw, cols)
    for kh in range(kh_max):
        for kw in range(kw_max):
            tap = [
                f"ih = oh * STRIDE_H + ({kh} * DIL_H - PAD_H)",
                f"x = tl.load(x_img + ih * W + iw{kw}[None, :], mask=c{kw} & ((ih >= 0) & (ih < H)),",
                "              other=0.0)",
                f"acc += tl.dot(w{kh}_{kw}, x)",
            ]
            guarded(lines, "        ", kh, kw, tap)


def stationary_kernel(kh_max: int = KH_MAX, kw_max: int = KW_MAX) -> str:
    """The weight-stationary kernel over row tiles (BLOCK_W pixels of one output row), taps unrolled
    up to kh_max x kw_max."""
    lines = _weights_head("conv_ws_kernel", "OH, OW, TILES, PER, N_WB, ALIGN,", kh_max, kw_max)
    lines += [
        "    y_img = y_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW)",
        "    if HAS_RES:",
        "        r_img = r_ptr + n * C_OUT * OH * OW + co[:, None] * (OH * OW)",
        "    for t in range(t0, t1):",
        "        oh = t // N_WB",
        "        # a row narrower than the tile starts it up to ALIGN columns early (masked) where that puts",
        "        # its output on a DMA-aligned address: a misaligned DMA moves a quarter more bytes",
        "        sh = (((n * C_OUT + tl.program_id(2) * BLOCK_CO) * OH + oh) * OW) % ALIGN",
        "        sh = sh * ((OW + sh) <= BLOCK_W).to(tl.int32)",
        "        ow = (t % N_WB) * BLOCK_W + tl.arange(0, BLOCK_W) - sh",
        "        acc = tl.zeros((BLOCK_CO, BLOCK_W), dtype=tl.float32)",
    ]
    row_tap_dots(lines, kh_max, kw_max, "ci_ok")
    lines += _store("oh * OW + ow[None, :]", "((ow >= 0) & (ow < OW))[None, :]")
    return "\n".join(lines) + "\n"


def pixel_kernel(kh_max: int = KH_MAX, kw_max: int = KW_MAX) -> str:
    """The weight-stationary kernel over flattened pixel tiles (BLOCK_W consecutive pixels of one
    image across rows), for a 2-D convolution whose output has its input's size (stride 1, "same"
    padding): a tap's input pixels are then the tile's own pixels shifted by one constant, one
    block DMA, and no row leaves most of its tile masked (a 40-pixel row in a 64-wide tile)."""
    lines = _weights_head("conv_px_kernel", "TILES, PER,", kh_max, kw_max)
    lines += [
        "    y_img = y_ptr + n * C_OUT * H * W + co[:, None] * (H * W)",
        "    if HAS_RES:",
        "        r_img = r_ptr + n * C_OUT * H * W + co[:, None] * (H * W)",
        "    for t in range(t0, t1):",
        "        p = t * BLOCK_W + tl.arange(0, BLOCK_W)",
        "        oh = p // W",
        "        ow = p % W",
        "        p_ok = p < H * W",
        "        acc = tl.zeros((BLOCK_CO, BLOCK_W), dtype=tl.float32)",
    ]
    for kw in range(kw_max):  # the tile's valid pixels per horizontal tap, then per vertical one
        guarded(
            lines,
            "        ",
            0,
            kw,
            [f"c{kw} = p_ok & (ow + ({kw} - PAD_W) >= 0) & (ow + ({kw} - PAD_W) < W)"],
        )
    for kh in range(kh_max):
        guarded(lines, "        ", kh, 0, [f"r{kh} = (oh + ({kh} - PAD_H) >= 0) & (oh + ({kh} - PAD_H) < H)"])
    for kh in range(kh_max):
        for kw in range(kw_max):
            tap = [
                f"x = tl.load(x_img + (p + (({kh} - PAD_H) * W + ({kw} - PAD_W)))[None, :],",
                f"              mask=ci_ok[:, None] & (r{kh} & c{kw})[None, :], other=0.0)",
                f"acc += tl.dot(w{kh}_{kw}, x)",
            ]
            guarded(lines, "        ", kh, kw, tap)
    lines += _store("p[None, :]", "p_ok[None, :]")
    return "\n".join(lines) + "\n"


_WS_LAUNCH = """
        bci = triton.next_power_of_2(c_in)
        taps, es = kh * kw, x.element_size()
        row_bw = min(CONVS_BLOCK_W, triton.next_power_of_2(ow))
        local = CONVS_LOCAL_BYTES // (2 if CONVS_DUAL_CORE else 1)  # a dual-core PE's half
        # flattened pixel tiles for a 2-D "same" convolution whose rows leave their tiles a quarter
        # masked or more, or are narrower than 32 pixels; else (or where those tiles do not fit) rows
        same = nd == 2 and (oh, ow) == (h, w_) and (sh, sw, dh, dw) == (1, 1, 1, 1) and ow % row_bw != 0
        for pixels in ((True, False) if same and (4 * ow <= 3 * row_bw or row_bw < 32) else (False,)):
            bw = CONVS_BLOCK_W if pixels else row_bw
            bco = CONVS_BLOCK_CO
            while True:  # output channels halved until the weights, acc, output and input tiles fit
                need = (taps * bco * bci * es + bco * bw * (4 + es)  # weights, acc, output
                        + CONVS_STAGES * taps * bci * bw * es)  # the taps' input tiles per stage
                if need <= local or bco <= 16:
                    break
                bco //= 2
            if kh > {kh_max} or kw > {kw_max} or need > local:
                continue
            n_wb = triton.cdiv(ow, bw)
            tiles = triton.cdiv(oh * ow, bw) if pixels else oh * n_wb
            co_blocks = triton.cdiv(c_out, bco)
            per = triton.cdiv(tiles, max(1, CONVS_PROGRAMS // (batch * co_blocks)))
            grid = (batch, triton.cdiv(tiles, per), co_blocks)
            if pixels:
                conv_px_kernel[grid](x, w, w if b is None else b, bn_m, bn_v, bn_g, bn_b,
                                     w if r is None else r, y, c_in, c_out, h,
                                     w_, eps, tiles, per, KH=kh, KW=kw, PAD_H=ph, PAD_W=pw, STRIDE_H=1,
                                     STRIDE_W=1, DIL_H=1, DIL_W=1, HAS_BN=bn is not None,
                                     BN_AFFINE=affine, HAS_RES=r is not None, ACT=act,
                                     HAS_BIAS=b is not None,
                                     BLOCK_CO=bco, BLOCK_CI=bci, BLOCK_W=bw,
                                     num_stages=CONVS_STAGES, dual_core=CONVS_DUAL_CORE)
            else:
                conv_ws_kernel[grid](x, w, w if b is None else b, bn_m, bn_v, bn_g, bn_b,
                                     w if r is None else r, y, c_in, c_out, h,
                                     w_, eps, oh, ow, tiles, per, n_wb, max(1, CONVS_ALIGN_BYTES // es),
                                     KH=kh, KW=kw, PAD_H=ph, PAD_W=pw, STRIDE_H=sh, STRIDE_W=sw, DIL_H=dh,
                                     DIL_W=dw, HAS_BN=bn is not None, BN_AFFINE=affine,
                                     HAS_RES=r is not None, ACT=act,
                                     HAS_BIAS=b is not None,
                                     BLOCK_CO=bco, BLOCK_CI=bci, BLOCK_W=bw,
                                     num_stages=CONVS_STAGES, dual_core=CONVS_DUAL_CORE)
            return y
"""


def _launch() -> str:
    """The stationary kernel's launch where it fits, else the row kernel's (two stages, dual core), as
    the tail of `forward`: the row rewrite's launch with this one before its own. Its options are the
    module's CONVS_STAGES and CONVS_DUAL_CORE, which its footprint check reads too (a launch knob
    changing one call's literal would leave the check behind)."""
    rows = conv_rows.LAUNCH.replace("{stages}", "2").replace("{dual}", "True")
    alloc, sep, row_launch = rows.partition("        bw = min(CONVR_BLOCK_W")
    if not sep:
        raise MutationError("templates.conv.rows' launch changed: the stationary rewrite cannot reuse it")
    values = {"kh_max": KH_MAX, "kw_max": KW_MAX}
    ws = _WS_LAUNCH.lstrip("\n")
    for key, value in values.items():
        ws = ws.replace("{" + key + "}", str(value))
    return alloc + ws + sep + row_launch


def rewrite(
    source: str,
    block_co: int = 128,
    block_w: int = 64,
    stages: int = 2,
    dual: bool = False,
    programs: int = 64,
) -> str:
    """The module rewritten with the weight-stationary kernel (and the row kernel as its fallback);
    MutationError when it is not a one-convolution model with a bias-only epilogue, or already
    rewritten."""
    if conv_rows.REWRITTEN in source or conv_rows.GPU_MARKER in source:
        raise MutationError("already a convolution rewrite")
    model = conv_module(source)
    head, sep, _ = conv_rows.model_tail().partition("        y = torch.empty(")
    if not sep:
        raise MutationError("templates.conv.rows' model tail changed: the stationary rewrite cannot reuse it")
    launch = _launch()
    tail = model.fill(head.rstrip(" ") + launch.lstrip("\n"))
    consts = (
        f"CONVS_BLOCK_CO = {block_co}\nCONVS_BLOCK_W = {block_w}\n"
        f"CONVS_PROGRAMS = {programs * (2 if dual else 1)}\n"
        f"CONVS_STAGES = {stages}\nCONVS_DUAL_CORE = {dual}  # the stationary launch's options, one place\n"
        f"CONVS_LOCAL_BYTES = {LOCAL_BYTES}\nCONVS_ALIGN_BYTES = {ALIGN_BYTES}\n"
        + conv_rows.constants(128, 64, 64)
    )
    kernels = stationary_kernel() + "\n\n" + pixel_kernel() + "\n\n" + conv_rows.KERNEL
    return rewritten_module(
        module_imports(source) + module_support(source), f"{MARKER}\n{consts}", kernels, model.init_src, tail
    )


# (BLOCK_CO, BLOCK_W, num_stages, dual_core)
# (128, 128, one stage): wider tiles re-read each tap's input fewer times (hold-out 5x5 conv 26.3 -> 24.1
# us) but lose on long rows (conv1d_fp16 77.2 -> 80.0 us): both are offered, the first ranked higher
VARIANTS: tuple[tuple[int, int, int, bool], ...] = ((128, 64, 2, False), (128, 128, 1, False))


def stationary_mutations(source: str) -> list[Mutation]:
    """The weight-stationary rewrite of a convolution module, one move per variant ([] when it does
    not apply)."""
    try:
        rewrite(source)
    except (MutationError, SyntaxError):
        return []
    return [
        Mutation(
            name=f"conv_stationary={co}x{w}"
            + ("+dual" if dual else "")
            + ("" if stages == 2 else f"/stages={stages}"),
            family="conv_rows",
            description=f"rewrite the convolution with every tap's weight tile ({co} output channels x all "
            f"C_in) loaded once per program, which then walks a run of output-row tiles of {w} pixels, one "
            f"block DMA per tap; num_stages={stages}, dual_core={dual}",
            apply=partial(rewrite, block_co=co, block_w=w, stages=stages, dual=dual),
            helps=("memory", "latency"),
            prior=1.9 - 0.1 * rank,
            remedies=("fewer_bytes", "bigger_commands", "overlap"),
            kernel="",
        )
        for rank, (co, w, stages, dual) in enumerate(VARIANTS)
    ]
