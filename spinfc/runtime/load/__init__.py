"""Loading: a model name to a ready stack on its device (`loader`), the dtype each part computes in (`precision`),
and the fingerprint that names what produced a score (`fingerprint`). The families' code is beside this folder
(`weights/` reads a checkpoint, `models/` runs it, `towers/` reads media, `quant/` reads quantized weights)."""
