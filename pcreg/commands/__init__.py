"""The subcommands of ``pcreg``, one module each: ``add_parser(sub)`` wires the arguments and the
handler is a thin wrapper (argument parsing and output only) over a library function:
:mod:`pcreg.api`, :mod:`pcreg.odometry`, :mod:`pcreg.mapping` and :mod:`pcreg.viz` (register,
odometry, map, view), :mod:`pcreg.bench` (benchmark), :mod:`pcreg.demo` (demo),
:mod:`pcreg.engine` (train, vit, detr, evaluate, evaluate-log)."""
