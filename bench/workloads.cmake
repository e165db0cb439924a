# The A3C learner's update (the trainscope side of bench/pytorch/a3c_update.py).
ts_add_bench(a3c_update_bench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/a3c_update_bench.cpp LIBS ts_workloads)
# Deep Speech 2's spectrogram front end (ms of CPU per second of audio).
ts_add_bench(speech_frontend_bench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/speech_frontend_bench.cpp LIBS ts_workloads)
# Issue 43: each workload's GEMM shapes (one iteration, the engine's shape recorder) timed on
# oneDNN's sgemm, its matmul primitive and OpenBLAS (dlopen, where installed); a plain program,
# bench/pytorch/gemm_shapes.py adds MKL through PyTorch. Here, not in engine.cmake: it runs the workloads.
ts_add_bench(gemm_shapes_bench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/gemm_shapes_bench.cpp
  LIBS ts_workloads DNNL::dnnl nlohmann_json::nlohmann_json OpenMP::OpenMP_CXX ${CMAKE_DL_LIBS})
