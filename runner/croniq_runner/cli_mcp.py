"""The `croniq mcp` command: the management API served to AI assistants over
the Model Context Protocol (croniq_runner.mcp_server).

The `mcp` package is optional (`pip install 'croniq-runner[mcp]'`): it is
imported only when the command runs, so the agent and the other commands
stay standard library and requests, and without it the command says how to
install it (exit 2)."""

import argparse
from importlib import metadata
from typing import TextIO

from croniq_runner.cli_api import EXIT_USAGE, Api, Failed

HELP = (
    "serve the management API to an AI assistant: an MCP server on standard input and "
    "output, with this API key's scopes (needs croniq-runner[mcp])"
)
INSTALL = "pip install 'croniq-runner[mcp]'"
# The packages whose absence means the extra is not installed (or too old:
# mcp 1.x has no mcp.server.mcpserver).
EXTRA = ("mcp", "mcp_types", "pydantic")


def add(
    subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]",
    parent: argparse.ArgumentParser,
) -> None:
    command = subparsers.add_parser("mcp", help=HELP, description=HELP, parents=[parent])
    command.set_defaults(run=serve)


def serve(api: Api, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        from croniq_runner import mcp_server
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in EXTRA:
            raise
        raise Failed(EXIT_USAGE, missing()) from None
    return mcp_server.serve(api)


def missing() -> str:
    try:
        found = f" (this Python has mcp {metadata.version('mcp')})"
    except metadata.PackageNotFoundError:
        found = ""
    return f"mcp needs the mcp package 2.x{found}; install it with: {INSTALL}"
