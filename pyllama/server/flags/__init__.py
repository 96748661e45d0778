"""llama-server's command line, declared for argparse: ``parser`` builds it from the
groups (``sampling``, ``model``, ``cpu``, ``http``, ``logs``, ``hub``); ``cli`` turns the
parsed flags into ``Settings``."""

from pyllama.server.flags.parser import add_rpc_servers, build_parser, env_bool

__all__ = ["add_rpc_servers", "build_parser", "env_bool"]
