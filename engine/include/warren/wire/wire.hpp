// The whole codec in one include.
#pragma once

#include "warren/error.hpp"
#include "warren/result.hpp"
#include "warren/wire/constants.hpp"
#include "warren/wire/field_table.hpp"
#include "warren/wire/field_value.hpp"
#include "warren/wire/frame_decoder.hpp"
#include "warren/wire/frame_writer.hpp"
#include "warren/wire/method.hpp"
#include "warren/wire/output_queue.hpp"
#include "warren/wire/printing.hpp"
#include "warren/wire/properties.hpp"
