"""Ethos-U device model: block configs, memory regions, Part cost and the Vela bridge."""
