"""`--config FILE` and `--set KEY=VALUE`: a compaction config on the command line (`compact`,
`simulate`), read as `CompactConfig.from_mapping` reads one; `--set` wins over the file."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec

from planner.config import CompactConfig

F = TypeVar("F", bound=Callable[..., Any])


def config_options(function: F) -> F:
    """`--config` and `--set`, passed as `config_file` and `settings`."""
    function = click.option(
        "--set", "settings", multiple=True, metavar="KEY=VALUE", help="One compaction setting (repeatable)."
    )(function)
    return click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="Compaction config, TOML or JSON (keys of CompactConfig).",
    )(function)


def read_config(config_file: Path | None, settings: tuple[str, ...]) -> CompactConfig:
    """The config a file and `KEY=VALUE` settings give (a value is JSON, or else a string)."""
    data: dict[str, Any] = {}
    if config_file is not None:
        raw = config_file.read_bytes()
        try:
            data = tomllib.loads(raw.decode()) if config_file.suffix == ".toml" else msgspec.json.decode(raw)
        except (tomllib.TOMLDecodeError, msgspec.DecodeError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"cannot read {config_file}: {exc}", param_hint="--config") from exc
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep:
            raise click.BadParameter(f"{setting!r} is not KEY=VALUE", param_hint="--set")
        try:
            data[key] = msgspec.json.decode(value)
        except msgspec.DecodeError:
            data[key] = value
    try:
        return CompactConfig.from_mapping(data)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--config/--set") from exc
