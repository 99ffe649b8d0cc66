//! The definition files and viewports shipped with agw (`bundled/`, also at `fixtures/tools/` and `fixtures/viewports/`),
//! embedded so a binary without those directories still has them. The startup sync copies them
//! into the configured directories (docs/contract/tools-skills-viewports.md §11).

/// `(file name, contents)` of every bundled tool definition file.
pub const TOOL_FILES: &[(&str, &str)] = &[
    ("_bash_.backend", include_str!("../bundled/tools/_bash_.backend")),
    ("_plan_add_tasks_.backend", include_str!("../bundled/tools/_plan_add_tasks_.backend")),
    ("_plan_get_tasks_.backend", include_str!("../bundled/tools/_plan_get_tasks_.backend")),
    ("_plan_update_task_.backend", include_str!("../bundled/tools/_plan_update_task_.backend")),
    ("city_datetime.backend", include_str!("../bundled/tools/city_datetime.backend")),
    ("confirm_dialog.frontend", include_str!("../bundled/tools/confirm_dialog.frontend")),
    ("launch_fireworks.action", include_str!("../bundled/tools/launch_fireworks.action")),
    ("mock_chat_messages.backend", include_str!("../bundled/tools/mock_chat_messages.backend")),
    ("mock_city_weather.backend", include_str!("../bundled/tools/mock_city_weather.backend")),
    ("mock_image_generate.backend", include_str!("../bundled/tools/mock_image_generate.backend")),
    ("mock_logistics_status.backend", include_str!("../bundled/tools/mock_logistics_status.backend")),
    ("mock_ops_runbook.backend", include_str!("../bundled/tools/mock_ops_runbook.backend")),
    ("mock_sensitive_data_detector.backend", include_str!("../bundled/tools/mock_sensitive_data_detector.backend")),
    ("mock_todo_tasks.backend", include_str!("../bundled/tools/mock_todo_tasks.backend")),
    ("mock_transport_schedule.backend", include_str!("../bundled/tools/mock_transport_schedule.backend")),
    ("show_modal.action", include_str!("../bundled/tools/show_modal.action")),
    ("switch_theme.action", include_str!("../bundled/tools/switch_theme.action")),
];

/// `(file name, contents)` of every bundled viewport.
pub const VIEWPORT_FILES: &[(&str, &str)] = &[
    ("confirm_dialog.html", include_str!("../bundled/viewports/confirm_dialog.html")),
    ("show_logistics_status.html", include_str!("../bundled/viewports/show_logistics_status.html")),
    ("show_todo_card.html", include_str!("../bundled/viewports/show_todo_card.html")),
    ("show_transport_card.html", include_str!("../bundled/viewports/show_transport_card.html")),
    ("show_weather_card.html", include_str!("../bundled/viewports/show_weather_card.html")),
];
