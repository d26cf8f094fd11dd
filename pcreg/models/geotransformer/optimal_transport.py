"""Log-domain Sinkhorn optimal transport with a learnable dustbin (SuperGlue, Sarlin et al.
CVPR 2020, §3.3; used by GeoTransformer's point matching)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["LearnableLogOptimalTransport", "exp_or_zero", "log_sinkhorn", "scaling_sinkhorn"]

_NEG = -1e12  # "impossible" in log space without producing NaN (-inf - -inf)
# Largest spread of the finite scores of one problem for which the scaling form is used: the
# kernel exp(s - max) then stays >= e^-40 (float32 keeps ~1e-38 without denormals).
_SCALING_MAX_SPREAD = 40.0
# Below this, exp() is taken as 0 (e^-80 ~ 2e-35): see exp_or_zero.
_EXP_FLOOR = -80.0


def exp_or_zero(x: Tensor) -> Tensor:
    """``exp(x)``, with every entry below -80 mapped to exactly 0.

    The same values as ``x.exp()`` except where that gives less than ~2e-35 (a few 1e-36 at
    most, or denormals). The reason is speed: torch's vectorised exp leaves its fast path for
    arguments that underflow, and the ``_NEG`` (-1e12) entries of padded patch points make up
    much of a Sinkhorn problem. Measured on the 2-core CPU for a (256, 33, 33) tensor: 3.4 ms
    with such entries, 1.3 ms through this function (0.25 ms with none).
    """
    low = x < _EXP_FLOOR
    return x.clamp(min=_EXP_FLOOR).exp().masked_fill(low, 0.0)


def log_sinkhorn(scores: Tensor, log_mu: Tensor, log_nu: Tensor, num_iterations: int) -> Tensor:
    """Sinkhorn iterations in log space.

    Finds u, v with P = exp(scores + u_i + v_j) having row sums exp(log_mu) and column sums
    exp(log_nu). The last update is v, so column sums are exact and row sums converge.

    scores ``(B, R, C)``, log_mu ``(B, R)``, log_nu ``(B, C)`` -> log P ``(B, R, C)``.
    """
    u = torch.zeros_like(log_mu)
    v = torch.zeros_like(log_nu)
    for _ in range(num_iterations):
        u = log_mu - torch.logsumexp(scores + v[:, None, :], dim=2)
        v = log_nu - torch.logsumexp(scores + u[:, :, None], dim=1)
    return scores + u[:, :, None] + v[:, None, :]


def scaling_sinkhorn(scores: Tensor, log_mu: Tensor, log_nu: Tensor, num_iterations: int) -> Tensor:
    """The same iterations as :func:`log_sinkhorn` on the scaling vectors exp(u), exp(v).

    With K = exp(scores - m) (m the largest score of each problem) an iteration is two batched
    matrix-vector products instead of two log-sum-exps over the whole ``(B, R, C)`` tensor, so
    the exponential is taken once rather than twice per iteration (the log-domain form spends
    ~40 % of a CPU training step there at 50 iterations). Mathematically identical; numerically
    safe only while the finite scores of a problem span less than ~80 (float32 exp range), which
    :class:`LearnableLogOptimalTransport` checks before choosing it. Entries at ``_NEG`` are
    impossible (K = 0); every row and column must keep at least one finite entry.

    scores ``(B, R, C)``, log_mu ``(B, R)``, log_nu ``(B, C)`` -> log P ``(B, R, C)``.
    """
    m = scores.amax(dim=(1, 2), keepdim=True)  # (B, 1, 1), finite: every row has an entry
    # finite scores lie within _SCALING_MAX_SPREAD of m, so only the _NEG entries fall below
    # the floor, and they give exactly 0 either way
    kernel = exp_or_zero(scores - m)
    # K v as the row-vector product v^T K^T on a contiguous K^T: torch's batched matrix-vector
    # product (B, R, C) @ (B, C, 1) is ~5x slower on CPU than (B, 1, C) @ (B, C, R)
    # (0.24 vs 0.05 ms at (256, 33, 33)), and it runs twice per iteration
    kernel_t = kernel.transpose(1, 2).contiguous()
    mu = log_mu.exp()
    nu = log_nu.exp()
    v = torch.ones_like(nu)
    kv = torch.ones_like(mu)
    ktu = torch.ones_like(nu)
    for _ in range(num_iterations):
        kv = torch.bmm(v[:, None, :], kernel_t)[:, 0, :]
        u = mu / kv
        ktu = torch.bmm(u[:, None, :], kernel)[:, 0, :]
        v = nu / ktu
    # log u, log v from the last updates in log form: finite (and differentiable) where a
    # marginal is zero, which log(u) itself would not be
    log_u = log_mu - torch.log(kv)
    log_v = log_nu - torch.log(ktu)
    return scores - m + log_u[:, :, None] + log_v[:, None, :]


class LearnableLogOptimalTransport(nn.Module):
    """Partial assignment between the points of two patches with a dustbin row and column.

    The score matrix ``(B, R, C)`` is augmented with a dustbin column / row filled with the
    learned scalar ``alpha``. Real rows carry mass 1 each, the dustbin row the number of real
    columns (and symmetrically); everything is divided by the total R_b + C_b of each pair.
    Padded rows / columns (masks False) carry no mass and may only connect to the dustbins, so
    no row of the problem is empty and nothing becomes NaN. The output is log P scaled so that
    each real row sums to 1 (``log P + log(R_b + C_b)``).
    """

    def __init__(self, num_iterations: int = 100, init_alpha: float = 1.0) -> None:
        super().__init__()
        self.num_iterations = num_iterations
        self.alpha = nn.Parameter(torch.tensor(float(init_alpha)))

    def forward(self, scores: Tensor, row_valid: Tensor, col_valid: Tensor) -> Tensor:
        """scores ``(B, R, C)``, row_valid ``(B, R)``, col_valid ``(B, C)`` -> ``(B, R+1, C+1)``."""
        b, r, c = scores.shape
        alpha = self.alpha.to(scores.dtype)
        padded = torch.cat(
            [
                torch.cat([scores, alpha.expand(b, r, 1)], dim=2),
                alpha.expand(b, 1, c + 1),
            ],
            dim=1,
        )
        rows = torch.cat([row_valid, row_valid.new_ones(b, 1)], dim=1)  # dustbin row is real
        cols = torch.cat([col_valid, col_valid.new_ones(b, 1)], dim=1)
        pad_pair = ~(rows[:, :, None] & cols[:, None, :])
        # padded rows/columns keep their link to the opposite dustbin only
        pad_pair[:, :r, c] &= row_valid
        pad_pair[:, r, :c] &= col_valid
        padded = padded.masked_fill(pad_pair, _NEG)
        n_rows = row_valid.sum(1).to(scores.dtype)
        n_cols = col_valid.sum(1).to(scores.dtype)
        norm = -torch.log((n_rows + n_cols).clamp(min=1))  # (B,)
        log_cols = torch.where(n_cols > 0, torch.log(n_cols.clamp(min=1)), _NEG)
        log_rows = torch.where(n_rows > 0, torch.log(n_rows.clamp(min=1)), _NEG)
        log_mu = torch.cat([norm[:, None].expand(b, r), (log_cols + norm)[:, None]], 1)
        log_nu = torch.cat([norm[:, None].expand(b, c), (log_rows + norm)[:, None]], 1)
        log_mu = log_mu.masked_fill(~rows, _NEG)
        log_nu = log_nu.masked_fill(~cols, _NEG)
        finite = padded > _NEG / 2
        spread = (
            padded.masked_fill(~finite, float("-inf")).amax(dim=(1, 2))
            + padded.masked_fill(~finite, float("inf")).amin(dim=(1, 2)).neg()
        )
        solve = scaling_sinkhorn if bool(spread.max() < _SCALING_MAX_SPREAD) else log_sinkhorn
        out = solve(padded, log_mu, log_nu, self.num_iterations)
        return out - norm[:, None, None]

    def extra_repr(self) -> str:
        return f"num_iterations={self.num_iterations}"
