"""Tests of sagemeter.sagemaker."""
