"""One module per `kegen` subcommand: each provides `add_arguments(parser)` and `run(args) -> int`."""
