# The A3C learner's update (the trainscope side of bench/pytorch/a3c_update.py).
ts_add_bench(a3c_update_bench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/a3c_update_bench.cpp LIBS ts_workloads)
# Deep Speech 2's spectrogram front end (ms of CPU per second of audio).
ts_add_bench(speech_frontend_bench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/speech_frontend_bench.cpp LIBS ts_workloads)
