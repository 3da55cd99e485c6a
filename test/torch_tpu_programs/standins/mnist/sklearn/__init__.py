"""A stand-in for scikit-learn's dataset download (test/torch_tpu_programs/standins/README.md):
only ``sklearn.datasets.fetch_openml("mnist_784")``, which TorchTPU's ViT notebook calls to
download MNIST. Put on PYTHONPATH by test/torch_tpu_programs/run.py for that notebook only."""
