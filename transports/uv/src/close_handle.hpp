// Closing a libuv handle the driver allocated: libuv may still touch it until its close
// callback runs, so it is freed there, and its data pointer is cleared first so no callback
// that is still queued finds the object that owned it. Private to the libuv driver.
#pragma once

#include <uv.h>

namespace warren::uv::detail {

template <class Handle>
void close_and_free(Handle* h) {
  if (!h) return;
  h->data = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(h), [](uv_handle_t* x) { delete reinterpret_cast<Handle*>(x); });
}

}  // namespace warren::uv::detail
