"""Training environments: `dojo gen` mines tasks from history and synthesises them by mutation."""

from swedojo.datasets.gen.run import GenResult, YieldReport, generate, write_outputs
from swedojo.datasets.gen.settings import GenSettings
from swedojo.datasets.gen.strategies import (
           Model,
           ModelRewrite,
           ProceduralMutations,
           Strategy,
)

__all__ = ["GenResult", "GenSettings", "Model", "ModelRewrite", "ProceduralMutations", "Strategy", "YieldReport",
           "generate", "write_outputs"]
