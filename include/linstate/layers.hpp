// linstate/layers.hpp — the layer level (CPU): the SSE / GLA / GDN token mixer over any variant, and
// the small layers a model is built from, each with forward and backward. Not part of the bare
// <linstate/linstate.hpp>, so that its compile time does not grow. docs/layers.md describes them.
#pragma once

#include "layers/ops.hpp"
#include "layers/parameter.hpp"
#include "layers/token_mixer.hpp"
#include "layers/embedding.hpp"
#include "layers/linear.hpp"
#include "layers/rms_norm.hpp"
#include "layers/swiglu.hpp"
