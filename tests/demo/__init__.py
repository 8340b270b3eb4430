"""Tests for adapter.demo."""
