"""poptorch: the name PopTorch programs import; the implementation is the ipuof package."""
import sys

import ipuof
import ipuof.optim

sys.modules[__name__] = ipuof
sys.modules[__name__ + ".optim"] = ipuof.optim
