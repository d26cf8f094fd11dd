"""Subcommands configured by Hydra ``key=value`` overrides (train, vit, detr, evaluate)."""

from __future__ import annotations

__all__ = ["add_hydra_subcommand"]


def add_hydra_subcommand(
    sub,
    name: str,
    func,
    help: str,
    example: str,
    positional: tuple[str, list[str]] | None = None,
    remainder: bool = False,
):
    """A subcommand that takes Hydra ``key=value`` overrides (after an optional choice).
    ``remainder``: everything after the choice is kept as given (options included), for an
    action that parses its own arguments (``pcreg detr predict IMAGE --render PNG``)."""
    import argparse

    cmd = sub.add_parser(name, help=help, description=f"Hydra overrides, {example}")
    if positional is not None:
        cmd.add_argument(positional[0], choices=positional[1])
    overrides = cmd.add_argument(
        "overrides",
        nargs=argparse.REMAINDER if remainder else "*",
        default=[],
        help="Hydra overrides key=value",
    )
    overrides.required = False  # none given is fine; argparse marks these positionals required
    cmd.set_defaults(func=func, parser=cmd)
    return cmd
