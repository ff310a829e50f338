"""Landmarks and feature maps: mini-batch k-means, k-means Nystroem, random Fourier features."""

from .assign import nearest_centres
from .fourier import RandomFourierFeatures
from .kmeans import MiniBatchKMeans, minibatch_kmeans
from .nystroem import KMeansNystroem, default_gamma, gaussian_kernel, load_embedding_map
from .seeding import kmeans_parallel, kmeans_plusplus

__all__ = [
    "KMeansNystroem", "MiniBatchKMeans", "RandomFourierFeatures", "default_gamma",
    "gaussian_kernel", "kmeans_parallel", "kmeans_plusplus", "load_embedding_map",
    "minibatch_kmeans", "nearest_centres",
]
