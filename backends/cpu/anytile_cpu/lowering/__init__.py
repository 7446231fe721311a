"""Tile IR -> LLVM IR for the host CPU (see ``program.ProgramLowering``)."""
