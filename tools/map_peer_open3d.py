"""The peer of ``pcreg map``: Open3D's multiway registration as its tutorial and reconstruction
system do it, on the same turntable views (:mod:`pcreg.bench.turntable_map`).

Every pair ``(i, j)``, ``i < j``: FPFH + RANSAC (Open3D's ``registration_ransac_based_on_
feature_matching``, mutual filter off, 1.5-voxel distance, edge-length and distance checkers,
100k iterations at 0.999), then point-to-plane ICP at 1.5 voxels, and the information matrix
``get_information_matrix_from_point_clouds(source, target, 1.5 voxels, T)``; an edge is kept
where its correspondences cover 30 % of the smaller cloud (the reconstruction system's test).
The pose graph: the consecutive pairs (input order) as certain odometry edges, their motions
chained for the initial poses, every other kept pair an uncertain loop edge; Open3D's
``global_optimization`` (Levenberg-Marquardt, 1.5-voxel distance, edge_prune_threshold 0.25,
preference_loop_closure 1.0, reference node 0).

    python tools/map_peer_open3d.py ../shared/train_data/stanford_bunny_range_scans OUT \
        [--voxel 0.003] [--ordered]

``--ordered`` keeps the views in their order around the turntable (the dragon's: a loop
sequence, what the tutorial assumes); by default they are shuffled as for ``pcreg map``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from pcreg.errors import InputError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--voxel", type=float, default=0.003, help="metres (pcreg's ICP voxel "
                        "on these scans is 2.7-3.1 mm)")  # fmt: skip
    parser.add_argument("--ordered", action="store_true")
    parser.add_argument("--force", action="store_true", help="replace what an earlier run "
                        "wrote into OUT")  # fmt: skip
    args = parser.parse_args()
    import open3d as o3d

    from pcreg.bench.turntable_map import placement_errors, turntable_case

    reg = o3d.pipelines.registration
    o3d.utility.set_verbosity_level(o3d.utility.VerbosityLevel.Error)
    case = turntable_case(args.root, args.out / "views", args.seed, shuffle=not args.ordered,
                          overwrite=args.force)  # fmt: skip
    clouds = [np.load(f) for f in case.files]
    v = args.voxel
    start = time.perf_counter()
    pcds, feats = [], []
    for c in clouds:
        pc = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(c)).voxel_down_sample(v)
        pc.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(radius=2 * v, max_nn=30))
        feats.append(
            reg.compute_fpfh_feature(pc, o3d.geometry.KDTreeSearchParamHybrid(radius=5 * v,
                                                                              max_nn=100))
        )  # fmt: skip
        pcds.append(pc)
    o3d.utility.random.seed(args.seed)
    count = len(clouds)
    graph = reg.PoseGraph()
    odometry = np.eye(4)
    graph.nodes.append(reg.PoseGraphNode(odometry))
    edges = []
    for i in range(count):
        for j in range(i + 1, count):
            ransac = reg.registration_ransac_based_on_feature_matching(
                pcds[j], pcds[i], feats[j], feats[i], False, 1.5 * v,
                reg.TransformationEstimationPointToPoint(False), 3,
                [reg.CorrespondenceCheckerBasedOnEdgeLength(0.9),
                 reg.CorrespondenceCheckerBasedOnDistance(1.5 * v)],
                reg.RANSACConvergenceCriteria(100000, 0.999),
            )  # fmt: skip
            icp = reg.registration_icp(
                pcds[j], pcds[i], 1.5 * v, ransac.transformation,
                reg.TransformationEstimationPointToPlane(),
            )  # fmt: skip
            t = icp.transformation  # T_i_j: source j onto target i
            info = reg.get_information_matrix_from_point_clouds(pcds[j], pcds[i], 1.5 * v, t)
            ok = info[5, 5] / min(len(pcds[i].points), len(pcds[j].points)) >= 0.3
            if j == i + 1:  # odometry: always an edge, chained for the initial poses
                odometry = odometry @ t
                graph.nodes.append(reg.PoseGraphNode(odometry.copy()))
                graph.edges.append(reg.PoseGraphEdge(j, i, t, info, uncertain=False))
            elif ok:
                graph.edges.append(reg.PoseGraphEdge(j, i, t, info, uncertain=True))
            edges.append((j, i, bool(ok)))
    reg.global_optimization(
        graph, reg.GlobalOptimizationLevenbergMarquardt(),
        reg.GlobalOptimizationConvergenceCriteria(),
        reg.GlobalOptimizationOption(max_correspondence_distance=1.5 * v,
                                     edge_prune_threshold=0.25, preference_loop_closure=1.0,
                                     reference_node=0),
    )  # fmt: skip
    wall = time.perf_counter() - start
    poses = np.stack([np.asarray(n.pose) for n in graph.nodes])
    err = placement_errors(poses, case, clouds)
    for k, name in enumerate(case.names):
        print(
            f"view {k:2d} {name:24s} rot {err['rotation_deg'][k]:8.3f} deg  "
            f"trans {1000 * err['translation'][k]:8.3f} mm ({100 * err['fraction'][k]:.3f} %)"
        )
    within = (err["rotation_deg"] <= 2.0) & (err["fraction"] <= 0.01)
    print(json.dumps({
        "root": str(args.root), "ordered": args.ordered, "voxel": v, "pairs": len(edges),
        "accepted": sum(ok for *_, ok in edges), "edges_after_pruning": len(graph.edges),
        "within": int(within.sum()), "views": count, "wall_s": wall,
        "max_rotation_deg": float(err["rotation_deg"].max()),
        "max_translation_fraction": float(err["fraction"].max()),
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as err:  # an existing OUT without --force: one line, exit 2
        print(f"{Path(sys.argv[0]).name}: {err}", file=sys.stderr)
        sys.exit(2)
