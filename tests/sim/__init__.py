"""Tests for adapter.sim."""
