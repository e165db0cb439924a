ts_add_bench(engine_ops_bench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/engine_ops_bench.cpp LIBS ts_engine)
ts_add_bench(engine_rnn_bench SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/engine_rnn_bench.cpp LIBS ts_engine DNNL::dnnl)
