"""The pose graph of a map: scans are nodes (``P_k = T_world_scan``), registered edges are
constraints ``T_ref_src ≈ inv(P_ref) @ P_src``; the graph keeps the edges that agree with
the rest and places the scans they connect.

Steps (:func:`optimise_graph`):

1. **Cycle support.** Every triangle of registered edges is composed around its cycle; it is
   consistent when the composition is the identity within the tolerances below (doubled: three
   edges' errors add up). An edge's support is its number of consistent triangles.
2. **Initial poses.** Spanning trees (Kruskal) over the registered edges, poses composed
   along each from the reference scan: the tree taking supported edges first (most support,
   then confidence), then trees in 64 seeded random orders; the tree whose poses the most edges
   agree with (within twice the tolerances below) starts the optimisation. A wrong edge is
   then not in the start, even where no triangle tells it from the right ones (a scan with
   three edges, one wrong and the most confident: the trees through a right one agree with
   one more edge).
3. **Optimisation.** Open3D's ``global_optimization`` (Levenberg-Marquardt with Choi et al.'s
   line process, 2015) over the component of the reference scan, every edge *uncertain* (any
   edge may be wrong, so any may be pruned), ``edge_prune_threshold`` 0.25 and the
   correspondence distance of the information matrices (1.5 voxels).
4. **Residual check.** Every registered edge is compared with the optimised poses: the
   rotation of ``inv(T_ref_src) @ inv(P_ref) @ P_src`` (deg) and the RMS displacement it gives
   the source's points (input units). An edge over :attr:`GraphOptions.max_rotation_deg` or
   :attr:`GraphOptions.max_residual_voxels` of its voxel is rejected, as is one Open3D
   pruned; the graph is then optimised again without the rejected edges, until none is
   rejected (at most :attr:`GraphOptions.rounds` rounds).

Placement: the scans connected to the reference by kept edges are placed; every other scan is
*unplaced* (NaN pose), never guessed. The reference is the first scan given, unless it has no
kept edge: then the first scan of the largest connected component (the result says which). A
scan that hangs on a single edge (a bridge) cannot be checked by the graph: only the
pipeline's verdict vouches for that edge.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pcreg.mapping.edges import Edge
from pcreg.registration.information import INFORMATION_VOXELS

__all__ = ["GraphOptions", "GraphResult", "optimise_graph", "rotation_deg"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GraphOptions:
    """How strictly the graph judges its edges.

    Attributes:
        max_rotation_deg: an edge whose rotation disagrees with the optimised poses by more
            is rejected (a registration verified by ICP agrees to a fraction of a degree; a
            wrong one, a symmetric flip or another pair's pose, by tens).
        max_residual_voxels: likewise for the RMS displacement of the source's points, in
            voxels of the edge's registration.
        edge_prune_threshold: Open3D's: an edge whose line-process weight falls under it is
            pruned.
        preference_loop_closure: Open3D's weight of the uncertain edges' line process.
        rounds: optimise-and-check rounds at most.
        trees: random spanning trees tried for the initial poses besides the cycle-support
            one (a consensus: the tree most edges agree with).
    """

    max_rotation_deg: float = 5.0
    max_residual_voxels: float = 3.0
    edge_prune_threshold: float = 0.25
    preference_loop_closure: float = 1.0
    rounds: int = 4
    trees: int = 64


@dataclass
class GraphResult:
    """``poses (K, 4, 4) float64`` ``T_world_scan`` (NaN for an unplaced scan), ``placed
    (K,) bool``, ``reference`` (the scan whose frame is the world), ``unplaced`` ({scan:
    why}) and ``support (E,) int`` (each edge's consistent triangles); the edges' ``kept`` /
    ``rejected`` / residuals are set in place."""

    poses: np.ndarray
    placed: np.ndarray
    reference: int
    unplaced: dict[int, str]
    support: np.ndarray


def rotation_deg(rotation: np.ndarray) -> float:
    """The angle of a ``(3, 3)`` rotation, degrees."""
    cos = (float(np.trace(rotation)) - 1.0) / 2.0
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def _rms_motion(transform: np.ndarray, points: np.ndarray) -> float:
    """RMS displacement of ``points (N, 3)`` under ``transform (4, 4)``."""
    moved = points @ transform[:3, :3].T + transform[:3, 3]
    return float(np.sqrt(np.mean(np.sum((moved - points) ** 2, axis=1))))


def _samples(clouds: Sequence[np.ndarray], count: int = 256) -> list[np.ndarray]:
    """Up to ``count`` evenly spread points of each cloud (the residuals' probe points)."""
    out = []
    for cloud in clouds:
        cloud = np.asarray(cloud, np.float64)
        out.append(cloud[np.linspace(0, len(cloud) - 1, min(count, len(cloud))).astype(int)])
    return out


def _cycle_support(edges: Sequence[Edge], samples: Sequence[np.ndarray], opt: GraphOptions):
    """``(E,) int``: the consistent triangles of each registered edge (step 1)."""
    measured: dict[tuple[int, int], tuple[np.ndarray, int]] = {}  # (a, b) -> T_a_b, edge
    for n, e in enumerate(edges):
        if e.registered:
            measured[(e.ref, e.src)] = (e.transform, n)
            measured[(e.src, e.ref)] = (np.linalg.inv(e.transform), n)
    support = np.zeros(len(edges), int)
    nodes = sorted({a for a, _ in measured})
    neighbours = {a: sorted(b for (x, b) in measured if x == a) for a in nodes}
    for a in nodes:
        for b in neighbours[a]:
            if b <= a:
                continue
            for c in neighbours[b]:
                if c <= b or (c, a) not in measured:
                    continue
                (ab, e1), (bc, e2), (ca, e3) = measured[(a, b)], measured[(b, c)], measured[(c, a)]
                cycle = ab @ bc @ ca  # maps frame a to itself: the identity if consistent
                tol = 2 * opt.max_residual_voxels * max(edges[e].voxel for e in (e1, e2, e3))
                if (
                    rotation_deg(cycle[:3, :3]) <= 2 * opt.max_rotation_deg
                    and _rms_motion(cycle, samples[a]) <= tol
                ):
                    support[[e1, e2, e3]] += 1
    return support


def _components(count: int, links: Sequence[tuple[int, int]]) -> np.ndarray:
    """``(count,) int``: a component label per node (scipy's: labels in the order of each
    component's smallest node, so the component of node 0 is label 0)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    pairs = np.asarray(links, dtype=np.int64).reshape(-1, 2)
    adjacency = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), (count, count))
    return connected_components(adjacency, directed=False)[1]


def _reference(count: int, links: Sequence[tuple[int, int]]) -> tuple[int, np.ndarray]:
    """The reference scan and the mask of its component: scan 0 if it has a link, else the
    first scan of the largest component of two scans or more (scan 0 alone if none)."""
    labels = _components(count, links)
    linked = {k for link in links for k in link}
    if 0 in linked or not linked:
        return 0, labels == labels[0]
    sizes = {lab: int((labels == lab).sum()) for lab in set(labels[list(linked)].tolist())}
    best = max(sizes, key=lambda lab: (sizes[lab], -lab))  # ties: the earliest component
    mask = labels == best
    return int(np.flatnonzero(mask)[0]), mask


def _tree_poses(count: int, edges: Sequence[Edge], order: Sequence[int], root: int) -> np.ndarray:
    """``(count, 4, 4)`` poses along the spanning forest Kruskal takes from the edges in
    ``order``; NaN off the root's tree."""
    parent = list(range(count))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    tree: dict[int, list[tuple[int, np.ndarray]]] = {k: [] for k in range(count)}
    for n in order:
        e = edges[n]
        ra, rb = find(e.src), find(e.ref)
        if ra == rb:
            continue
        parent[ra] = rb
        tree[e.ref].append((e.src, e.transform))  # P_src = P_ref @ T_ref_src
        tree[e.src].append((e.ref, np.linalg.inv(e.transform)))
    poses = np.full((count, 4, 4), np.nan)
    poses[root] = np.eye(4)
    stack = [root]
    while stack:
        a = stack.pop()
        for b, t in tree[a]:
            if np.isnan(poses[b, 0, 0]):
                poses[b] = poses[a] @ t
                stack.append(b)
    return poses


def _agreeing(
    poses: np.ndarray, edges: Sequence[Edge], usable: Sequence[int], samples, opt: GraphOptions
) -> list[int]:
    """The edges of ``usable`` that ``poses`` reproduce within twice the tolerances (a tree's
    poses carry its edges' errors, not yet spread by the optimisation)."""
    out = []
    for n in usable:
        e = edges[n]
        error = np.linalg.inv(e.transform) @ np.linalg.inv(poses[e.ref]) @ poses[e.src]
        if not np.isfinite(error).all():
            continue
        if (
            rotation_deg(error[:3, :3]) <= 2 * opt.max_rotation_deg
            and _rms_motion(error, samples[e.src]) <= 2 * opt.max_residual_voxels * e.voxel
        ):
            out.append(n)
    return out


def _spanning_poses(
    count: int,
    edges: Sequence[Edge],
    usable: Sequence[int],
    support: np.ndarray,
    root: int,
    samples: Sequence[np.ndarray],
    opt: GraphOptions,
) -> np.ndarray:
    """Initial ``(count, 4, 4)`` poses (step 2): of the spanning trees Kruskal takes in the
    cycle-support order and in :attr:`GraphOptions.trees` seeded random orders, the one whose
    poses the most edges agree with (ties: the most confidence among them); NaN off the root's
    tree."""
    first = sorted(usable, key=lambda n: (-int(support[n]), -edges[n].confidence))
    rng = np.random.default_rng(0)
    best, best_score = None, (-1, -1.0)
    for trial in range(opt.trees + 1):
        order = first if trial == 0 else [usable[i] for i in rng.permutation(len(usable))]
        poses = _tree_poses(count, edges, order, root)
        agree = _agreeing(poses, edges, usable, samples, opt)
        score = (len(agree), sum(edges[n].confidence for n in agree))
        if score > best_score:
            best, best_score = poses, score
        if len(agree) == len(usable):
            break  # every edge agrees: no tree can do better
    return best


def _open3d_optimise(
    poses: np.ndarray, edges: Sequence[Edge], active: Sequence[int], root: int, opt: GraphOptions
) -> tuple[np.ndarray, set[int]]:
    """Open3D's LM over the nodes with a finite pose (step 3): optimised poses and the
    indices (into ``edges``) that Open3D pruned."""
    import open3d as o3d

    reg = o3d.pipelines.registration
    nodes = [k for k in range(len(poses)) if np.isfinite(poses[k]).all()]
    local = {k: n for n, k in enumerate(nodes)}
    graph = reg.PoseGraph()
    for k in nodes:
        graph.nodes.append(reg.PoseGraphNode(poses[k]))
    for n in active:
        e = edges[n]
        graph.edges.append(
            reg.PoseGraphEdge(
                local[e.src], local[e.ref], e.transform, e.information, uncertain=True
            )
        )
    voxel = float(np.median([edges[n].voxel for n in active]))
    option = reg.GlobalOptimizationOption(
        max_correspondence_distance=INFORMATION_VOXELS * voxel,
        edge_prune_threshold=opt.edge_prune_threshold,
        preference_loop_closure=opt.preference_loop_closure,
        reference_node=local[root],
    )
    level = o3d.utility.get_verbosity_level()
    o3d.utility.set_verbosity_level(o3d.utility.VerbosityLevel.Error)  # it prints every step
    try:
        reg.global_optimization(
            graph, reg.GlobalOptimizationLevenbergMarquardt(),
            reg.GlobalOptimizationConvergenceCriteria(), option,
        )  # fmt: skip
    finally:
        o3d.utility.set_verbosity_level(level)
    out = poses.copy()
    for k in nodes:
        out[k] = np.asarray(graph.nodes[local[k]].pose)
    out[nodes] = np.linalg.inv(out[root]) @ out[nodes]  # the reference's frame
    out[root] = np.eye(4)  # exactly: the product above leaves 1e-39-sized residues
    survived = {(int(e.source_node_id), int(e.target_node_id)) for e in graph.edges}
    pruned = {n for n in active if (local[edges[n].src], local[edges[n].ref]) not in survived}
    return out, pruned


def _residuals(edges: Sequence[Edge], poses: np.ndarray, samples: Sequence[np.ndarray]) -> None:
    """Set every registered edge's residual against ``poses`` (NaN where a pose is)."""
    for e in edges:
        if not e.registered:
            continue
        predicted = np.linalg.inv(poses[e.ref]) @ poses[e.src]
        if not np.isfinite(predicted).all():
            e.residual_deg = e.residual = float("nan")
            continue
        error = np.linalg.inv(e.transform) @ predicted
        e.residual_deg = rotation_deg(error[:3, :3])
        e.residual = _rms_motion(error, samples[e.src])


def _judge(e: Edge, pruned: bool, opt: GraphOptions) -> bool:
    """Whether the graph rejects ``e`` after a round (step 4); sets ``e.rejected``."""
    over = []
    if e.residual_deg > opt.max_rotation_deg:
        over.append(f"rotation {e.residual_deg:.2f} deg > {opt.max_rotation_deg:g} deg")
    if e.residual > opt.max_residual_voxels * e.voxel:
        over.append(f"RMS {e.residual / e.voxel:.1f} voxels > {opt.max_residual_voxels:g}")
    if over:
        e.rejected = "disagrees with the optimised graph: " + ", ".join(over)
    elif pruned:
        e.rejected = "pruned by the optimisation (line-process weight under the threshold)"
    return bool(e.rejected)


def optimise_graph(
    clouds: Sequence[np.ndarray], edges: Sequence[Edge], options: GraphOptions | None = None
) -> GraphResult:
    """Place the scans by the edges that agree with one another (see the module docstring).

    Args:
        clouds: the ``K`` scans ``(N_k, 3)``, input units (probe points for the residuals).
        edges: the registered and unregistered candidates (:func:`register_edges`); their
            ``kept``, ``rejected`` and residuals are set in place.
        options: the tolerances (default :class:`GraphOptions`).

    Returns:
        The :class:`GraphResult`.
    """
    opt = options or GraphOptions()
    count = len(clouds)
    samples = _samples(clouds)
    for e in edges:
        e.kept, e.rejected = False, "" if e.registered else "not registered"
    support = _cycle_support(edges, samples, opt)
    active = [n for n, e in enumerate(edges) if e.registered]
    poses = np.full((count, 4, 4), np.nan)
    root = 0
    rejected: set[int] = set()
    for round_ in range(opt.rounds + 1):
        root, mask = _reference(count, [(edges[n].src, edges[n].ref) for n in active])
        inside = [n for n in active if mask[edges[n].src] and mask[edges[n].ref]]
        poses = _spanning_poses(count, edges, inside, support, root, samples, opt)
        if not inside:
            break
        poses, pruned = _open3d_optimise(poses, edges, inside, root, opt)
        _residuals(edges, poses, samples)
        bad = {n for n in inside if _judge(edges[n], n in pruned, opt)}
        logger.info("pose graph round %d: %d edges, %d rejected", round_, len(inside), len(bad))
        if not bad:
            break
        rejected |= bad
        active = [n for n in active if n not in bad]
        if round_ == opt.rounds:  # no round left: the poses stand, its failing edges are
            logger.warning(  # marked rejected, not kept
                "pose graph: %d edges still disagree after %d rounds", len(bad), opt.rounds
            )
    placed = np.isfinite(poses).all(axis=(1, 2))
    for n in active:
        e = edges[n]
        if placed[e.src] and placed[e.ref] and not e.rejected:
            e.kept = True
        elif e.registered and not e.rejected:
            e.rejected = "joins scans outside the map's component"
    _residuals(edges, poses, samples)
    unplaced = {}
    for k in np.flatnonzero(~placed).tolist():
        ours = [n for n, e in enumerate(edges) if k in (e.src, e.ref) and e.registered]
        if not ours:
            unplaced[k] = "no candidate edge of this scan registered"
        elif all(n in rejected for n in ours):
            unplaced[k] = "every registered edge of this scan was rejected by the graph"
        else:
            unplaced[k] = "its registered edges do not connect it to the reference scan"
    poses[~placed] = np.nan
    return GraphResult(poses, placed, root, unplaced, support)
