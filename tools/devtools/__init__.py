"""Developer tooling (code generation, checks); not used at run time."""
