from kuota.exporter.pod_directory import apply_event, pod_info

POD = {
    "metadata": {"uid": "u-1", "namespace": "research", "name": "trainer-0"},
    "status": {
        "containerStatuses": [
            {"name": "main", "containerID": "containerd://abc123"},
            {"name": "sidecar", "containerID": "cri-o://def456"},
            {"name": "waiting"},
        ]
    },
}


def test_pod_info_maps_runtime_container_ids_without_their_scheme_to_names() -> None:
    info = pod_info(POD)
    assert (info.uid, info.namespace, info.name) == ("u-1", "research", "trainer-0")
    assert dict(info.containers) == {"abc123": "main", "def456": "sidecar"}
    assert info.container_name("abc123") == "main"
    assert info.container_name("unknown") == ""


def test_watch_events_add_update_and_remove_pods_by_uid() -> None:
    directory = apply_event({}, "ADDED", POD)
    assert set(directory) == {"u-1"}
    renamed = {**POD, "metadata": {**POD["metadata"], "name": "trainer-1"}}
    directory = apply_event(directory, "MODIFIED", renamed)
    assert directory["u-1"].name == "trainer-1"
    assert apply_event(directory, "DELETED", renamed) == {}
