"""The product subcommands of ``pcreg`` (register, odometry, view): argument parsing and
output only; the work is done by :mod:`pcreg.api`, :mod:`pcreg.odometry` and :mod:`pcreg.viz`."""
