"""Landmarks and feature maps: mini-batch k-means, k-means Nystroem, random Fourier features."""

from .fourier import RandomFourierFeatures
from .kmeans import MiniBatchKMeans, kmeans_plusplus, minibatch_kmeans
from .nystroem import KMeansNystroem, default_gamma, gaussian_kernel, load_embedding_map

__all__ = [
    "KMeansNystroem", "MiniBatchKMeans", "RandomFourierFeatures", "default_gamma",
    "gaussian_kernel", "kmeans_plusplus", "load_embedding_map", "minibatch_kmeans",
]
