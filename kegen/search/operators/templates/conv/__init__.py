"""Convolution templates: the implicit-GEMM seed a convolution chain is drafted as (`seed`), the
depthwise stencil (`depthwise`), and the mtia rewrites of a seed: output-row tiles with packed weights
(`rows`) and every tap's weights stationary in the local store (`stationary`). The GPU rewrite is
`templates.gpu_conv`, whose model tail the others share."""
