"""Tests for adapter.pods."""
