def pytest_configure(config):
    config.addinivalue_line("markers", "vllm: vLLM on tpu (test/vllm/, scripts/test_vllm.sh)")
    config.addinivalue_line("markers", "smoke: the short case of a tier")
