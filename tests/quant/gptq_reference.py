"""GPTQ written from the paper, in NumPy, against qfx's C++ implementation.

Frantar, Ashkboos, Hoefler, Alistarh 2022, "GPTQ: Accurate Post-Training Quantization
for Generative Pre-trained Transformers", Algorithm 1, without lazy batches (every
column's error goes to all later columns at once: the paper's lazy batches only
reorder that arithmetic), with the paper's groups (a block's qparams from the current,
error-updated weights when the sweep reaches its first column) and the ordering by
descending diag(H) (then static groups: a block's qparams from the original weights).
The qparams are torch.ao's min/max formulas in float32, as qfx's compute_qparams.

    gptq_reference.py GPTQ_CHECK   (the gptq_check executable: qfx's side)

A layer W [24, 80], X [512, 80] with correlated columns and one dead input, blocks of
32 (the last one 16), per-channel qparams, 4-bit symmetric s8 and affine u8,
act_order on and off, lazy batches of 128, 32 and 24: qfx's codes and qparams must
equal this implementation's, and GPTQ's proxy error be lower than round to nearest's.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

F32 = np.float32
EPS = np.finfo(np.float32).eps


def qparams(mn, mx, qmin, qmax, affine):
    """torch.ao's _calculate_qparams in float32 (range extended to include 0)."""
    mn = np.minimum(np.asarray(mn, F32), F32(0))
    mx = np.maximum(np.asarray(mx, F32), F32(0))
    qrange = qmax - qmin
    if affine:
        scale = np.maximum((mx - mn) / F32(qrange), F32(EPS)).astype(F32)
        zp = np.clip(qmin - np.round(mn / scale).astype(np.int64), qmin, qmax)
    else:
        scale = np.maximum(np.maximum(-mn, mx) / F32(qrange / 2), F32(EPS)).astype(F32)
        zp = np.full(scale.shape, (qmin + qmax) // 2 if qmin >= 0 else 0, np.int64)
    return scale, zp


def blocks_of(k, block):
    """Column ranges of the groups of a row: one group, or blocks of `block` (the last short)."""
    return [(0, k)] if block == 0 else [(a, min(a + block, k)) for a in range(0, k, block)]


def gptq(W, X, qmin, qmax, affine, block, act_order, damp):
    """Algorithm 1, column by column. Returns codes [C, K], scale [C, G], zp [C, G], Q [C, K]."""
    W = W.astype(np.float64)
    X = X.astype(np.float64)
    C, K = W.shape
    H = 2.0 / X.shape[0] * (X.T @ X)
    groups = blocks_of(K, block)
    # Qparams of the original (float32) weight, per channel or per block: qfx's observer.
    W32 = W.astype(F32)
    scale = np.zeros((C, len(groups)), F32)
    zp = np.zeros((C, len(groups)), np.int64)
    for g, (a, b) in enumerate(groups):
        scale[:, g], zp[:, g] = qparams(W32[:, a:b].min(1), W32[:, a:b].max(1), qmin, qmax, affine)
    dead = np.diag(H) == 0
    H[dead, dead] = 1.0
    W = W.copy()
    W[:, dead] = 0.0
    perm = np.argsort(-np.diag(H), kind="stable") if act_order else np.arange(K)
    W = W[:, perm]
    H = H[np.ix_(perm, perm)]
    H[np.diag_indices(K)] += damp * np.mean(np.diag(H))
    U = np.linalg.cholesky(np.linalg.inv(H)).T  # upper: H^-1 = U^T U
    dynamic = block > 0 and not act_order
    codes = np.zeros((C, K))
    Q = np.zeros((C, K))
    for j in range(K):
        if dynamic and j % block == 0:  # the group's qparams from the current weights
            cur = W[:, j:j + block]
            scale[:, j // block], zp[:, j // block] = qparams(cur.min(1).astype(F32), cur.max(1).astype(F32),
                                                              qmin, qmax, affine)
        g = perm[j] // block if block else 0
        s = scale[:, g].astype(np.float64)
        z = zp[:, g].astype(np.float64)
        codes[:, j] = np.clip(np.round(W[:, j] / s) + z, qmin, qmax)
        Q[:, j] = (codes[:, j] - z) * s
        err = (W[:, j] - Q[:, j]) / U[j, j]
        W[:, j:] -= np.outer(err, U[j, j:])
    inv = np.argsort(perm)
    return codes[:, inv], scale, zp, Q[:, inv]


def nearest(W, scale, zp, qmin, qmax, block):
    """Round to nearest of the original weight on the given per-group qparams."""
    C, K = W.shape
    g = np.arange(K) // block if block else np.zeros(K, np.int64)
    s = scale[:, g].astype(np.float64)
    z = zp[:, g].astype(np.float64)
    return (np.clip(np.round(W.astype(np.float64) / s) + z, qmin, qmax) - z) * s


def relative_error(W, Q, H):
    D = W.astype(np.float64) - Q
    W = W.astype(np.float64)
    return np.sum((D @ H) * D) / np.sum((W @ H) * W)


def layer(seed=0):
    rng = np.random.default_rng(seed)
    C, K, N = 24, 80, 512
    W = rng.standard_normal((C, K)) * 0.05
    W[rng.integers(0, C, 6), rng.integers(0, K, 6)] *= 8  # a few outliers
    mix = np.eye(K) + 0.6 * rng.standard_normal((K, K)) / np.sqrt(K)
    X = rng.standard_normal((N, K)) @ mix * rng.uniform(0.2, 3.0, K) + 0.3 * rng.standard_normal(K)
    X[:, 7] = 0.0  # a dead input channel
    return W.astype(F32), X.astype(F32)


def main():
    exe = sys.argv[1]
    W, X = layer()
    X64 = X.astype(np.float64)
    H = 2.0 / X.shape[0] * (X64.T @ X64)
    failures = []
    cases = 0
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "W.npy"), W)
        np.save(os.path.join(tmp, "X.npy"), X)
        for dtype, scheme, qmin, qmax in (("s8", "symmetric", -8, 7), ("u8", "affine", 0, 15)):
            for block in (32, 0):
                for act_order in (0, 1):
                    codes, scale, zp, Q = gptq(W, X, qmin, qmax, scheme == "affine", block, act_order, 0.01)
                    # Round to nearest on qfx's observed qparams (the original weight's).
                    s0 = np.zeros_like(scale)
                    z0 = np.zeros_like(zp)
                    for g, (a, b) in enumerate(blocks_of(W.shape[1], block)):
                        s0[:, g], z0[:, g] = qparams(W[:, a:b].min(1), W[:, a:b].max(1), qmin, qmax, scheme == "affine")
                    err_rtn = relative_error(W, nearest(W, s0, z0, qmin, qmax, block), H)
                    err_gptq = relative_error(W, Q, H)
                    name = "%s %s block %d act_order %d" % (dtype, scheme, block, act_order)
                    if not err_gptq < err_rtn:
                        failures.append("%s: GPTQ's error %.5f is not below round to nearest's %.5f" % (name, err_gptq, err_rtn))
                    args = [exe, os.path.join(tmp, "W.npy"), os.path.join(tmp, "X.npy"), tmp, "4", dtype, scheme,
                            str(block), str(act_order), "128,32,24", "0.01"]
                    r = subprocess.run(args, capture_output=True, text=True)
                    if r.returncode != 0:
                        failures.append("%s: gptq_check failed: %s" % (name, r.stderr.strip()))
                        continue
                    for lazy in (128, 32, 24):
                        cases += 1
                        out = lambda f: os.path.join(tmp, "%s_%d.%s" % (f, lazy, "txt" if f == "errors" else "npy"))
                        c_codes = np.load(out("codes"))
                        c_scale = np.load(out("scale"))
                        c_zp = np.load(out("zero_point"))
                        c_rtn, c_gptq = (float(v) for v in open(out("errors")).read().split())
                        diff = int(np.sum(c_codes != codes))
                        if diff:
                            failures.append("%s lazy %d: %d of %d codes differ" % (name, lazy, diff, codes.size))
                        if not np.array_equal(c_scale, scale.reshape(-1)) or not np.array_equal(c_zp, zp.reshape(-1)):
                            failures.append("%s lazy %d: qparams differ (max scale diff %g, zero points differ at %d)" % (
                                name, lazy, np.max(np.abs(c_scale - scale.reshape(-1))), np.sum(c_zp != zp.reshape(-1))))
                        if not (abs(c_rtn - err_rtn) <= 1e-9 * err_rtn and abs(c_gptq - err_gptq) <= 1e-9 * err_gptq):
                            failures.append("%s lazy %d: errors (%.12g, %.12g) != NumPy's (%.12g, %.12g)" % (
                                name, lazy, c_rtn, c_gptq, err_rtn, err_gptq))
                    print("%-36s relative error: nearest %.5f, GPTQ %.5f" % (name, err_rtn, err_gptq))
    for f in failures:
        print("FAIL", f)
    print("%d cases, %d failures" % (cases, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
