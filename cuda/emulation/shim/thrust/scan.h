// cuda/emulation/shim/thrust/scan.h — see execution_policy.h.
#pragma once
#include "execution_policy.h"
