//! cordon-helper library (in progress).
