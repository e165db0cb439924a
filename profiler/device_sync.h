#pragma once
// Waiting for the GPUs before the GPU tracer's last flush (CUDA builds only). CUPTI's forced flush
// hands back records of work that has not finished, with no end time, and cuptiFinalize expects
// the client to have synchronised first (cupti_activity.h); a device that is still working when
// the trace is cut loses its tail.

namespace ts::profiler {

// cudaDeviceSynchronize on every device whose primary context is active in this process (the
// runtime API's, which the engine uses), without creating a context on the others; the calling
// thread's current device is kept. A device in an error state (a kernel faulted) cannot be waited
// on: what it left unfinished shows as incomplete records (GpuTrace::incomplete_records).
void synchronize_devices_in_use();

}  // namespace ts::profiler
