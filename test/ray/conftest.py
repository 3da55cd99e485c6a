def pytest_configure(config):
    config.addinivalue_line("markers", "smoke: the short case of a tier")
