//! `mock_todo_tasks` (§4.13).

use serde_json::{Value, json};

use super::MOCK_TAG_ZH;
use crate::builtin::args;
use crate::builtin::java_random::JavaRandom;
use crate::dates;

pub(crate) const NAME: &str = "mock_todo_tasks";

const TITLES: [&str; 10] = [
    "整理需求文档",
    "回复客户邮件",
    "同步项目进展",
    "代码评审",
    "准备周会汇报",
    "修复线上缺陷",
    "更新测试用例",
    "部署预发环境",
    "跟进物流异常",
    "预订差旅行程",
];
const PRIORITIES: [&str; 3] = ["高", "中", "低"];
const STATUSES: [&str; 3] = ["待处理", "进行中", "已完成"];

pub(crate) fn run(arguments: &Value) -> Value {
    let mut random = JavaRandom::for_args(arguments);
    let total = 3 + random.next_int(4);
    let base = jiff::civil::date(2026, 2, 13);
    let tasks: Vec<Value> = (0..total)
        .map(|i| {
            let title = TITLES[((i + random.next_int(10)) % 10) as usize];
            let priority = *random.pick(&PRIORITIES);
            let status = *random.pick(&STATUSES);
            let due = dates::add_days(base, i64::from(1 + random.next_int(7))).map(dates::format_ymd);
            json!({"id": format!("TASK-{}", 100 + i), "title": title, "priority": priority, "status": status, "dueDate": due})
        })
        .collect();
    json!({
        "owner": args::non_blank(arguments, "owner").unwrap_or_else(|| "当前用户".to_owned()),
        "total": total,
        "tasks": tasks,
        "mockTag": MOCK_TAG_ZH,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_vector() {
        let out = run(&json!({"owner":"张三"}));
        assert_eq!(out["owner"], "张三");
        assert_eq!(out["total"], 5);
        let rows: Vec<String> = out["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                format!("{} {} {} {} {}", t["id"], t["title"], t["priority"], t["status"], t["dueDate"])
                    .replace('"', "")
            })
            .collect();
        assert_eq!(
            rows,
            [
                "TASK-100 预订差旅行程 高 已完成 2026-02-17",
                "TASK-101 准备周会汇报 低 待处理 2026-02-15",
                "TASK-102 更新测试用例 高 进行中 2026-02-18",
                "TASK-103 回复客户邮件 中 待处理 2026-02-20",
                "TASK-104 预订差旅行程 高 待处理 2026-02-19",
            ]
        );
        assert_eq!(out["mockTag"], "幂等随机数据");
        let keys: Vec<&String> = out["tasks"][0].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["id", "title", "priority", "status", "dueDate"]);
    }

    #[test]
    fn default_owner() {
        let out = run(&json!({}));
        assert_eq!(out["owner"], "当前用户");
        let total = out["total"].as_i64().unwrap();
        assert!((3..=6).contains(&total));
        assert_eq!(out["tasks"].as_array().unwrap().len() as i64, total);
    }
}
