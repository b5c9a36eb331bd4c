"""poptorch: the name PopTorch programs import; the implementation is the ipuof package."""
import sys

import ipuof
import ipuof.optim
import ipuof.poptorch_core

sys.modules[__name__] = ipuof
sys.modules[__name__ + ".optim"] = ipuof.optim
sys.modules[__name__ + ".poptorch_core"] = ipuof.poptorch_core
